// e2e/lib/validate_schema.js — validates a JSON document against one of schema/*.json with ajv.
//   node e2e/lib/validate_schema.js SCHEMA_FILE DOC_FILE   (exit 0 valid, 1 invalid, 77 no ajv)
const path = require('path');
const fs = require('fs');
const cache = process.env.LLMR_CACHE || path.join(process.env.HOME || '/tmp', '.cache/llmr');
let Ajv;
try { Ajv = require(path.join(cache, 'npm/node_modules/ajv')); } catch (e) { console.log('SKIP: ajv not installed'); process.exit(77); }
const ajv = new (Ajv.default || Ajv)({ allErrors: true, strict: false });
const schema = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const doc = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
const validate = ajv.compile(schema);
if (validate(doc)) process.exit(0);
console.log(JSON.stringify(validate.errors, null, 1));
process.exit(1);
