/**
 * How many CSV exports (of invocations, of usage summaries) a process streams at once (NEXUS_EXPORTS_AT_ONCE). An
 * export holds database connections and a share of the event loop for as long as its client reads; one more is
 * refused with 503 `exports_busy` and a Retry-After, before it reads anything. Built once per process (services.ts).
 */
import { AppError } from '../../errors.js';

export function createExportSlots(atOnce: number) {
  let running = 0;
  return {
    /** A slot, or the refusal when all are taken; calling what it returns (once or more) gives the slot back. */
    take(): () => void {
      if (running >= atOnce) {
        throw new AppError('exports_busy', `This process is streaming ${atOnce} exports, the most it runs at once; retry shortly`);
      }
      running++;
      let held = true;
      return () => {
        if (!held) return;
        held = false;
        running--;
      };
    },
  };
}

export type ExportSlots = ReturnType<typeof createExportSlots>;
