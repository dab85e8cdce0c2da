/**
 * What a browser does at the HTTP level, for the sign-in tests: it keeps the cookies each answer sets (one jar per
 * host, as browsers do: 127.0.0.1's ports share it) and sends them back, follows redirects one by one, and submits
 * a page's form. No script runs; the pages of the sign-in need none.
 */
export interface Page {
  status: number;
  url: string;
  location: string | undefined;
  body: string;
  headers: Headers;
}

export class Browser {
  readonly cookies = new Map<string, string>();
  /** Every Set-Cookie received, as sent (to check their attributes). */
  readonly setCookies: string[] = [];

  private keep(headers: Headers): void {
    for (const line of headers.getSetCookie()) {
      this.setCookies.push(line);
      const [pair, ...attributes] = line.split(';');
      const at = pair!.indexOf('=');
      const name = pair!.slice(0, at).trim();
      const value = pair!.slice(at + 1).trim();
      const gone = attributes.some((a) => {
        const [k, v] = a.trim().split('=');
        if (k!.toLowerCase() === 'max-age') return Number(v) <= 0;
        if (k!.toLowerCase() === 'expires') return new Date(a.trim().slice(8)).getTime() <= Date.now();
        return false;
      });
      if (gone || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  cookieHeader(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  /** One request, its redirect not followed. */
  async request(url: string, init: RequestInit = {}): Promise<Page> {
    const headers = new Headers(init.headers);
    if (this.cookies.size) headers.set('Cookie', this.cookieHeader());
    const res = await fetch(url, { ...init, headers, redirect: 'manual' });
    this.keep(res.headers);
    const location = res.headers.get('location') ?? undefined;
    return {
      status: res.status,
      url,
      location: location ? new URL(location, url).href : undefined,
      body: await res.text(),
      headers: res.headers,
    };
  }

  /** GETs `url` and follows its redirects until an answer that is not one (or `stop` says so of a URL). */
  async visit(url: string, stop: (url: string) => boolean = () => false): Promise<Page> {
    let page = await this.request(url);
    for (let hops = 0; page.location && page.status >= 300 && page.status < 400 && hops < 20; hops++) {
      if (stop(page.location)) return page;
      page = await this.request(page.location);
    }
    return page;
  }

  /** Submits the page's first form (by POST), its hidden fields and `fields`, and follows the redirects. */
  async submit(page: Page, fields: Record<string, string>, stop?: (url: string) => boolean): Promise<Page> {
    const form = /<form[^>]*action="([^"]*)"[^>]*>([\s\S]*?)<\/form>/.exec(page.body);
    if (!form) throw new Error(`no form on ${page.url}: ${page.body.slice(0, 300)}`);
    const body = new URLSearchParams();
    for (const input of form[2]!.matchAll(/<input[^>]*type="hidden"[^>]*>/g)) {
      const name = /name="([^"]*)"/.exec(input[0])?.[1];
      const value = /value="([^"]*)"/.exec(input[0])?.[1] ?? '';
      if (name) body.set(name, value.replace(/&amp;/g, '&').replace(/&quot;/g, '"'));
    }
    for (const [k, v] of Object.entries(fields)) body.set(k, v);
    const action = new URL(form[1]!.replace(/&amp;/g, '&'), page.url).href;
    const posted = await this.request(action, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: body.toString(),
    });
    if (!posted.location || posted.status < 300 || posted.status >= 400) return posted;
    if (stop?.(posted.location)) return posted;
    return this.visit(posted.location, stop);
  }
}
