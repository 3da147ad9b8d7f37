// Validates JSON files against a JSON Schema (draft-07) with ajv: node validate_schema.js SCHEMA FILE...
// Exits 1 naming the file and the failing path when one does not match. Used by e2e/test_node_*.sh.
'use strict';
const fs = require('fs');
const Ajv = require('ajv');
const ajv = new Ajv({allErrors: true, strict: false});
const [schemaPath, ...files] = process.argv.slice(2);
const validate = ajv.compile(JSON.parse(fs.readFileSync(schemaPath, 'utf8')));
let bad = 0;
for (const f of files) {
  let doc;
  try { doc = JSON.parse(fs.readFileSync(f, 'utf8')); } catch (e) { console.log(`${f}: not JSON: ${e.message}`); bad++; continue; }
  if (!validate(doc)) { console.log(`${f}: ${ajv.errorsText(validate.errors)}`); bad++; }
}
console.log(`${files.length - bad}/${files.length} valid against ${schemaPath}`);
process.exit(bad ? 1 : 0);
