/** Text the console fetched (an export needs the key or the session: fetched, then saved), saved by the browser as a file. */
export function saveFile(text: string, name: string, type = 'text/csv'): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** A file name's time stamp: now, to the second, without colons (20261206T104500). */
export const stamp = () => new Date().toISOString().slice(0, 19).replace(/[-:]/g, '');
