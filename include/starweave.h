/** @file
 * starweave umbrella header: includes every public header but comm_mpi.h
 * and comm_nccl.h. */
#ifndef STARWEAVE_H
#define STARWEAVE_H
#include "starweave/runtime.h"
#include "starweave/tensor.h"
#include "starweave/mesh.h"
#include "starweave/comm.h"
#include "starweave/ops.h"
#include "starweave/mappings.h"
#include "starweave/params.h"
#include "starweave/layers.h"
#include "starweave/heads.h"
#include "starweave/blocks.h"
#include "starweave/pipeline.h"
#include "starweave/dit.h"
#include "starweave/dit_model.h"
#include "starweave/gpt.h"
#include "starweave/plan.h"
#include "starweave/checkpoint.h"
#include "starweave/weights.h"
#include "starweave/trace.h"
#endif
