/**
 * A doubly linked list whose items carry their own links: adding and removing
 * allocate nothing, and an item that leaves is unlinked and its links cleared,
 * so nothing long-lived points at it any more. The gateway lists its calls under
 * way so (a shutdown cuts them; the heartbeat writes them): a Set, added to and
 * deleted from on every call, is rehashed often, and V8 keeps each rehashed table
 * linked to the next for its iterators; once one such table reached the old
 * generation, every call it held survived young-generation collections too.
 */
export interface Linked<T> {
  listPrev: T | null;
  listNext: T | null;
}

export class IntrusiveList<T extends Linked<T>> {
  private head: T | null = null;

  add(item: T): void {
    item.listNext = this.head;
    if (this.head) this.head.listPrev = item;
    this.head = item;
  }

  delete(item: T): void {
    if (item.listPrev) item.listPrev.listNext = item.listNext;
    else if (this.head === item) this.head = item.listNext;
    else return; // not in the list
    if (item.listNext) item.listNext.listPrev = item.listPrev;
    item.listPrev = item.listNext = null;
  }

  isEmpty(): boolean {
    return this.head === null;
  }

  /** Each item; `fn` may remove it (the next one is taken first). */
  forEach(fn: (item: T) => void): void {
    for (let item = this.head; item;) {
      const next: T | null = item.listNext;
      fn(item);
      item = next;
    }
  }
}
