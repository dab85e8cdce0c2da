/** A list's table, page by page: its columns, its rows (a row's detail opened under it), its empty state and its pager. */
import { Fragment, type ComponentChildren, type JSX } from 'preact';
import type { Paged } from '../hooks.js';
import { Empty } from '../ui.js';

function Pager({ list }: { list: Paged<unknown> }) {
  if (!list.hasNext && !list.hasPrevious) return null;
  return (
    <nav class="pager" aria-label="Pages">
      <button type="button" onClick={list.previous} disabled={!list.hasPrevious || list.loading}>
        ← Previous
      </button>
      <span>Page {list.page}</span>
      <button type="button" onClick={list.next} disabled={!list.hasNext || list.loading}>
        Next →
      </button>
    </nav>
  );
}

/** A list's table: its column headers, and a caption for screen readers when the page gives one. */
export function ListTable(props: { caption?: string | undefined; columns: string[]; children: ComponentChildren }) {
  return (
    <table>
      {props.caption ? <caption class="sr-only">{props.caption}</caption> : null}
      <thead>
        <tr>
          {props.columns.map((column) => (
            <th scope="col" key={column}>
              {column}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>{props.children}</tbody>
    </table>
  );
}

/**
 * The page of `list` shown: `empty` when it has no item, else a table of one `row` per item and, under an item's row,
 * its `detail` when it gives one (a panel across the columns); then the pager.
 */
export function PagedTable<T>(props: {
  list: Paged<T>;
  caption?: string;
  columns: string[];
  empty: ComponentChildren;
  row: (item: T) => JSX.Element;
  detail?: (item: T) => ComponentChildren;
  /** The item's id (its `id` unless said). */
  keyOf?: (item: T) => string;
}) {
  const { list, columns } = props;
  const keyOf = props.keyOf ?? ((item: T) => (item as { id: string }).id);
  const detail = (item: T) => {
    const shown = props.detail?.(item);
    return shown ? (
      <tr>
        <td colSpan={columns.length}>{shown}</td>
      </tr>
    ) : null;
  };
  return (
    <>
      {list.items?.length === 0 ? (
        <Empty>{props.empty}</Empty>
      ) : (
        <ListTable caption={props.caption} columns={columns}>
          {list.items?.map((item) => (
            <Fragment key={keyOf(item)}>
              {props.row(item)}
              {detail(item)}
            </Fragment>
          ))}
        </ListTable>
      )}
      <Pager list={list} />
    </>
  );
}
