/**
 * The statements every table with an `id` has, typed by its row, for repositories
 * (in the spirit of Infisical's ormify): each takes the transaction last, defaulting
 * to the pool; json columns are written as JSON text (knex would send an array as a
 * PostgreSQL array); a unique violation becomes one AppError, 409 `conflict` unless
 * the table names its own. Anything beyond these stays a query in the repository.
 */
import { AppError, isUniqueViolation } from '../errors.js';
import type { Queryable } from './database.js';

export interface TableOptions<Row> {
  /** Columns of type json/jsonb. */
  json?: readonly (keyof Row & string)[];
  /** The error a unique violation on insert or update becomes, given the values written. */
  conflict?: (values: Partial<Row>) => AppError;
}

export function table<Row extends { id: string }>(db: Queryable, name: string, options: TableOptions<Row> = {}) {
  function toColumns(values: Partial<Row>): Record<string, unknown> {
    if (!options.json) return values;
    const columns: Record<string, unknown> = { ...values };
    // null stays SQL NULL (not the JSON value null).
    for (const column of options.json) if (columns[column] != null) columns[column] = JSON.stringify(columns[column]);
    return columns;
  }

  async function writing<T>(values: Partial<Row>, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      throw options.conflict?.(values) ?? new AppError('conflict', `The ${name} row conflicts with an existing one`);
    }
  }

  return {
    async find(where: Partial<Row>, q: Queryable = db): Promise<Row[]> {
      return q(name).where(where);
    },

    async findOne(where: Partial<Row>, q: Queryable = db): Promise<Row | undefined> {
      return q(name).where(where).first();
    },

    async findById(id: string, q: Queryable = db): Promise<Row | undefined> {
      return q(name).where({ id }).first();
    },

    /** Locks the row until the transaction ends. */
    async findByIdForUpdate(id: string, tx: Queryable): Promise<Row | undefined> {
      return tx(name).where({ id }).forUpdate().first();
    },

    async insert(row: Row, q: Queryable = db): Promise<Row> {
      return writing(row, async () => {
        const [inserted] = await q(name).insert(toColumns(row)).returning('*');
        return inserted as Row;
      });
    },

    /** The row as updated. */
    async updateById(id: string, patch: Partial<Row>, q: Queryable = db): Promise<Row> {
      return writing(patch, async () => {
        const [updated] = await q(name).where({ id }).update(toColumns(patch)).returning('*');
        return updated as Row;
      });
    },
  };
}
