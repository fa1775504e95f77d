// Server-rendered HTML helpers for the connect page and the authorization server's error page.

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"'`]/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** No framing (clickjacking on a consent page), no scripts, no caching, no referrer leaking the uid. */
export function securityHeaders(): Record<string, string> {
  return {
    'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
    'X-Frame-Options': 'DENY',
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'Cache-Control': 'no-store',
  };
}

const STYLE = `body{font-family:system-ui,sans-serif;max-width:32rem;margin:2rem auto;padding:0 1rem;color:#1a1a1a}
h1{font-size:1.4rem}dl{display:grid;grid-template-columns:auto 1fr;gap:.3rem .8rem}dt{font-weight:600}
fieldset{border:1px solid #ccc;border-radius:6px;margin:1rem 0}label{display:block;margin:.3rem 0}
input[type=email],input[name=code]{font-size:1rem;padding:.4rem;width:100%;box-sizing:border-box}
button{font-size:1rem;padding:.5rem 1rem;margin:.5rem .5rem 0 0}.error{color:#b00020}.note{color:#555}`;

export function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title><style>${STYLE}</style></head>
<body>${body}</body></html>`;
}
