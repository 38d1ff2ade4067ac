const assert = require('node:assert');
const { sum } = require('../sum.js');
assert.strictEqual(sum([1, 2, 3]), 6);
assert.strictEqual(sum([]), 0);
