/** Prints the contract coverage of the last `npm test` run (test-results/run). */
import { printContractCoverage } from './test-records.js';

printContractCoverage();
