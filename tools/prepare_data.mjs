// prepare_data.mjs: text files -> GPT-2 BPE token shards in llm.c's format
// and llm.c's token-to-bytes table; run through tools/prepare-data,
// which passes the package directory (SW_NPM_DIR) and the pinned package
// (SW_TOKENIZER_PACKAGE). The BPE itself is the npm package gpt-tokenizer
// (its r50k_base encoding is GPT-2's: tiktoken's "gpt2"); nothing of it is
// copied here.
//
// The files, all little-endian, as llm.c writes and reads them:
//   NAME_val.bin, NAME_train.bin: a header of 256 int32 (magic 20240520,
//     version 1, the token count), then the tokens as uint16
//     (dev/data/data_common.py write_datafile). Every document is preceded
//     by the end-of-text token 50256, as dev/data/tinyshakespeare.py and
//     fineweb.py do; the first --val-tokens tokens of the stream are the
//     val shard, the rest the train shard (tinyshakespeare.py's split).
//   gpt2_tokenizer.bin: a header of 256 int32 (magic 20240328, version 2,
//     the vocabulary size 50257, the end-of-text id 50256), then per token
//     one length byte and its bytes (train_gpt2.py write_tokenizer; read by
//     llmc/tokenizer.h and by gpt_train --tokenizer).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const me = process.env.SW_PREPARE_NAME || 'prepare_data.mjs';
const pkg = process.env.SW_TOKENIZER_PACKAGE || 'gpt-tokenizer@3.4.0';
const DATA_MAGIC = 20240520, TOKENIZER_MAGIC = 20240328, HEADER_INTS = 256, EOT = 50256;

function usage() {
  return `usage: ${me} [options] FILE...
Tokenizes the text files FILE... (UTF-8) with GPT-2's BPE into llm.c's token
shards, for gpt_train --data, and writes the token-to-bytes table, for
gpt_train --tokenizer (samples then print as text):
  DIR/NAME_train.bin, DIR/NAME_val.bin  header of 256 int32 (magic 20240520,
                     version 1, token count), uint16 tokens; every document
                     preceded by the end-of-text token 50256
  DIR/gpt2_tokenizer.bin  llm.c's tokenizer table (magic 20240328, version 2,
                     vocabulary 50257, end-of-text 50256; per token a length
                     byte and its bytes)
options:
  -o, --output DIR   where the files go (.)
  --name NAME        prefix of the shards' names (data)
  --val-tokens N     tokens of the val shard, taken from the start of the
                     stream (default: a tenth of the tokens)
  --split-blank-lines  documents are a file's sections separated by blank lines
                     ("\\n\\n", as llm.c's tinyshakespeare.py; default: a file
                     is one document)
  --encode TEXT      print the GPT-2 token ids of TEXT separated by spaces (for
                     gpt_train --generate with a BPE vocabulary) and stop
  --install          npm install ${pkg} into the package directory and stop
  --npm-dir DIR      the package directory ($SW_NPM_DIR, else
                     \${XDG_CACHE_HOME:-~/.cache}/starweave/npm)
  --help             this text
Exit status: 0, 2 for bad arguments or input (a missing file, text that is not
UTF-8, an output that cannot be written), 3 where node, npm or the package is
missing (the message says how to install it).
`;
}

function die(status, msg) {
  process.stderr.write(`${me}: ${msg}\n`);
  process.exit(status);
}

function parseArgs(argv) {
  const o = { out: '.', name: 'data', val: -1, blank: false, encode: null, files: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) die(2, `${a} needs a value (see --help)`);
      return argv[++i];
    };
    if (a === '--help' || a === '-h') { process.stdout.write(usage()); process.exit(0); }
    else if (a === '-o' || a === '--output') o.out = value();
    else if (a === '--name') o.name = value();
    else if (a === '--val-tokens') {
      const v = value();
      if (!/^[0-9]+$/.test(v)) die(2, `--val-tokens expects a count of tokens, got '${v}'`);
      o.val = Number(v);
    }
    else if (a === '--split-blank-lines') o.blank = true;
    else if (a === '--encode') o.encode = value();
    else if (a === '--npm-dir') value(); /* the wrapper's */
    else if (a.startsWith('-') && a !== '-') die(2, `unknown option ${a} (see --help)`);
    else o.files.push(a);
  }
  if (o.encode === null && o.files.length === 0) die(2, 'no input files (see --help)');
  if (o.name.includes('/')) die(2, `--name is a file name prefix, without '/' (got '${o.name}')`);
  return o;
}

// The package, from the directory npm installed it into.
function loadTokenizer() {
  const dir = process.env.SW_NPM_DIR || '.';
  const req = createRequire(path.resolve(dir, 'node_modules') + path.sep);
  const how = `install it: ${me} --install (npm install --prefix ${dir} ${pkg}); ` +
    `Debian's npm: apt-get install npm`;
  let enc, ranks;
  try {
    enc = req('gpt-tokenizer/encoding/r50k_base');
    ranks = req('gpt-tokenizer/bpeRanks/r50k_base');
  } catch (e) {
    die(3, `the npm package ${pkg} (GPT-2's BPE) cannot be loaded from ${dir}: ` +
      `${String(e.message).split('\n')[0]}; ${how}`);
  }
  ranks = ranks.default || ranks;
  if (!Array.isArray(ranks) || ranks.length !== EOT || enc.vocabularySize !== EOT + 1)
    die(3, `the npm package in ${dir} is not ${pkg}'s GPT-2 encoding (50256 ranks and <|endoftext|>): ${how}`);
  return { enc, ranks };
}

// Token id -> its bytes: the ranks hold a string (UTF-8 text) or the bytes
// of the tokens that are not valid UTF-8 alone; 50256 is "<|endoftext|>".
function tokenBytes(ranks) {
  const te = new TextEncoder();
  const table = ranks.map((r, i) => {
    const b = typeof r === 'string' ? te.encode(r) : Uint8Array.from(r);
    if (b.length < 1 || b.length > 255) die(3, `token ${i} has ${b.length} bytes: the package's data is not GPT-2's`);
    return b;
  });
  table.push(te.encode('<|endoftext|>'));
  return table;
}

// Writes `parts` (Uint8Arrays) to `file` through a temporary file renamed
// over it: a failed write leaves no half file.
function writeFile(file, parts) {
  const tmp = `${file}.tmp${process.pid}`;
  try {
    const fd = fs.openSync(tmp, 'w');
    try {
      for (const p of parts) fs.writeSync(fd, p);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, file);
  } catch (e) {
    try { fs.unlinkSync(tmp); } catch { /* not there */ }
    die(2, `cannot write '${file}': ${e.message}`);
  }
}

function header(magic, version, a, b) {
  const h = new Int32Array(HEADER_INTS);
  h[0] = magic; h[1] = version; h[2] = a; h[3] = b || 0;
  return new Uint8Array(h.buffer);
}

function shard(file, tokens) {
  const body = Uint16Array.from(tokens);
  writeFile(file, [header(DATA_MAGIC, 1, tokens.length), new Uint8Array(body.buffer)]);
  console.log(`${me}: ${file}: ${tokens.length} tokens (${HEADER_INTS * 4 + 2 * tokens.length} bytes)`);
}

const o = parseArgs(process.argv.slice(2));
if (process.platform && new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1)
  die(3, 'this machine is big-endian: the files are little-endian and written as typed arrays');
const { enc, ranks } = loadTokenizer();
// encode_ordinary: "<|endoftext|>" in the text is text, never the token 50256
const encode = (text) => enc.encode(text, { disallowedSpecial: new Set() });
if (o.encode !== null) {
  console.log(encode(o.encode).join(' '));
  process.exit(0);
}

// the output directory first: no tokenizing for nothing
try {
  fs.mkdirSync(o.out, { recursive: true });
  fs.accessSync(o.out, fs.constants.W_OK);
} catch (e) {
  die(2, `cannot write into the output directory '${o.out}': ${e.message}`);
}
const table = tokenBytes(ranks);
const utf8 = new TextDecoder('utf-8', { fatal: true });
const tokens = [];
let docs = 0, bytes = 0;
for (const file of o.files) {
  let raw;
  try {
    raw = fs.readFileSync(file);
  } catch (e) {
    die(2, `cannot read input '${file}': ${e.message}`);
  }
  let text;
  try {
    text = utf8.decode(raw);
  } catch {
    die(2, `input '${file}' is not UTF-8 text (GPT-2's BPE reads text; convert it, e.g. iconv -t UTF-8)`);
  }
  bytes += raw.length;
  const sections = o.blank ? text.split('\n\n') : [text];
  sections.forEach((s, i) => {
    // tinyshakespeare.py keeps the "\n\n" at the end of every section but the last
    const doc = o.blank && i !== sections.length - 1 ? s + '\n\n' : s;
    const ids = encode(doc);
    // the table must give the document's bytes back: a package whose data
    // changed would be caught here, not in a training run
    let n = 0;
    for (const t of ids) n += table[t].length;
    const back = new Uint8Array(n);
    n = 0;
    for (const t of ids) { back.set(table[t], n); n += table[t].length; }
    if (Buffer.compare(Buffer.from(back), Buffer.from(doc, 'utf8')) !== 0)
      die(3, `the tokens of '${file}' do not decode back to its bytes with ${pkg}'s table: the package is not GPT-2's BPE`);
    tokens.push(EOT);
    for (const t of ids) tokens.push(t);
    docs++;
  });
}
if (tokens.length >= 2 ** 31) die(2, `${tokens.length} tokens: an llm.c shard holds fewer than 2^31`);
const nval = o.val >= 0 ? Math.min(o.val, tokens.length) : Math.floor(tokens.length / 10);
shard(path.join(o.out, `${o.name}_val.bin`), tokens.slice(0, nval));
shard(path.join(o.out, `${o.name}_train.bin`), tokens.slice(nval));
const lengths = new Uint8Array(table.length);
table.forEach((b, i) => { lengths[i] = b.length; });
const parts = [header(TOKENIZER_MAGIC, 2, table.length, EOT)];
table.forEach((b, i) => { parts.push(lengths.subarray(i, i + 1), b); });
const tokfile = path.join(o.out, 'gpt2_tokenizer.bin');
writeFile(tokfile, parts);
console.log(`${me}: ${tokfile}: ${table.length} tokens' bytes`);
console.log(`${me}: ${o.files.length} file(s), ${bytes} bytes, ${docs} document(s), ${tokens.length} tokens ` +
  `(${(bytes / Math.max(tokens.length - docs, 1)).toFixed(2)} bytes per token)`);
