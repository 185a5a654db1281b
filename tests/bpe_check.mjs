// tests/test_bpe.sh's reader of the files starweave-prepare-data writes,
// from llm.c's layouts (not from the tool's code); prints what it found on
// one line, exits 1 where a rule is broken.
//   node bpe_check.mjs files DIR NAME [--blank] TEXT...   the shards' and
//     the table's headers; the val and train tokens, decoded by the table,
//     give back "<|endoftext|>" + the bytes of each document, exactly (a
//     TEXT; with --blank its sections); the first tokens
//   node bpe_check.mjs sample OUT TEXT...   the prompt of OUT's first
//     "sample (step N): PROMPT | ..." is text of the corpus
import fs from 'node:fs';

const [mode, dir, ...rest] = process.argv.slice(2);
const bad = (why) => { console.log(why); process.exit(1); };
const i32 = (b, k) => b.readInt32LE(4 * k);

function table(file) {
  const b = fs.readFileSync(file);
  if (b.length < 1024) bad(`${file}: ${b.length} bytes, shorter than its header`);
  const [magic, version, vocab, eot] = [0, 1, 2, 3].map((k) => i32(b, k));
  if (magic !== 20240328 || version !== 2 || vocab !== 50257 || eot !== 50256)
    bad(`${file}: header magic ${magic} version ${version} vocab ${vocab} eot ${eot} ` +
      '(expected 20240328 2 50257 50256)');
  const tokens = [];
  let at = 1024;
  for (let i = 0; i < vocab; i++) {
    const n = b[at];
    if (!(n >= 1) || at + 1 + n > b.length) bad(`${file}: token ${i} has length ${n} at byte ${at} of ${b.length}`);
    tokens.push(b.subarray(at + 1, at + 1 + n));
    at += 1 + n;
  }
  if (at !== b.length) bad(`${file}: ${b.length - at} bytes after the last token`);
  return { tokens, bytes: b.length };
}

function shard(file) {
  const b = fs.readFileSync(file);
  const [magic, version, count] = [0, 1, 2].map((k) => i32(b, k));
  if (magic !== 20240520 || version !== 1 || b.length !== 1024 + 2 * count)
    bad(`${file}: magic ${magic} version ${version} count ${count}, ${b.length} bytes ` +
      '(expected 20240520, 1, 1024 + 2 x count bytes)');
  for (let k = 3; k < 256; k++) if (i32(b, k) !== 0) bad(`${file}: header int ${k} is not 0`);
  const t = [];
  for (let k = 0; k < count; k++) t.push(b.readUInt16LE(1024 + 2 * k));
  return t;
}

// the documents, each after "<|endoftext|>": the files, or with --blank
// their "\n\n"-separated sections, "\n\n" kept but after the last
// (llm.c's dev/data/tinyshakespeare.py)
const EOT = Buffer.from('<|endoftext|>');
const blank = rest[1] === '--blank';
const docs = (files) => files.flatMap((f) => {
  const t = fs.readFileSync(f, 'utf8');
  if (!blank) return [t];
  const s = t.split('\n\n');
  return s.map((x, i) => (i < s.length - 1 ? x + '\n\n' : x));
});
const corpus = (files) => Buffer.concat(docs(files).flatMap((d) => [EOT, Buffer.from(d, 'utf8')]));

if (mode === 'files') {
  const [name, ...texts] = rest.filter((a) => a !== '--blank');
  const tab = table(`${dir}/gpt2_tokenizer.bin`);
  const val = shard(`${dir}/${name}_val.bin`), train = shard(`${dir}/${name}_train.bin`);
  const all = val.concat(train);
  const decoded = Buffer.concat(all.map((t) => tab.tokens[t]));
  const want = corpus(texts);
  if (!decoded.equals(want)) {
    let k = 0;
    while (k < want.length && decoded[k] === want[k]) k++;
    bad(`decoded tokens differ from the text at byte ${k} (${decoded.length} bytes decoded, ${want.length} expected)`);
  }
  const eots = all.filter((t) => t === 50256).length;
  const ndocs = docs(texts).length;
  if (eots !== ndocs) bad(`${eots} end-of-text tokens for ${ndocs} documents`);
  console.log(`val ${val.length} + train ${train.length} tokens decode to the ${want.length} bytes of ` +
    `${ndocs} documents exactly; first tokens ${all.slice(0, 4).join(' ')}; table of ${tab.tokens.length} ` +
    `tokens (${tab.bytes} bytes)`);
} else if (mode === 'sample') {
  const out = dir, texts = rest;
  const m = /sample \(step [0-9]+\): ([\s\S]*?) \| /.exec(fs.readFileSync(out, 'latin1'));
  if (!m) bad(`no sample line in ${out}`);
  const prompt = Buffer.from(m[1], 'latin1');
  if (!corpus(texts).includes(prompt)) bad(`the sample's prompt '${m[1]}' is not text of the corpus`);
  console.log(`sample prompt '${prompt.toString('utf8').replace(/\n/g, '\\\\n') /* the test's echo reads escapes */}' is text of the corpus`);
} else {
  bad(`unknown mode ${mode}`);
}
