// The console's shared parts: loading and title hooks, status lines, the action form, fields, tables, and formats.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import type { ComponentChildren } from 'preact';
import { ApiFailure } from './api.js';
import { shortId } from './format.js';

/** Loads `fn` now and again on `reload()`; shows errors in place. */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[]): { data: T | undefined; error: string | null; reload: () => void } {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    fn().then(
      (d) => live && (setData(d), setError(null)),
      (e: unknown) => live && setError(message(e)),
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  return { data, error, reload: useCallback(() => setTick((t) => t + 1), []) };
}

/** The window title names the page, as its heading does (WCAG 2.4.2). */
export function useTitle(text: string | undefined) {
  useEffect(() => {
    document.title = text ? `${text} · Agent API console` : 'Agent API console';
  }, [text]);
}

export const message = (e: unknown) => (e instanceof ApiFailure ? `${e.error.message}` : e instanceof Error ? e.message : String(e));

export function Status({ text, kind = 'info' }: { text: string | null; kind?: 'info' | 'error' }) {
  if (!text) return null;
  return (
    <p class={kind === 'error' ? 'status error' : 'status'} role={kind === 'error' ? 'alert' : 'status'}>
      {text}
    </p>
  );
}

/** A form whose submit runs `action`; errors and results are announced next to it. */
export function ActionForm(props: { label: string; action: () => Promise<string | void>; children?: ComponentChildren; danger?: boolean; name?: string }) {
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<{ text: string; kind: 'info' | 'error' } | null>(null);
  return (
    <form
      class="action"
      aria-label={props.name ?? props.label}
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        try {
          const text = await props.action();
          setResult(text ? { text, kind: 'info' } : null);
        } catch (err) {
          setResult({ text: message(err), kind: 'error' });
        } finally {
          setBusy(false);
        }
      }}
    >
      {props.children}
      <button type="submit" disabled={busy} class={props.danger ? 'danger' : ''}>
        {props.label}
      </button>
      <Status text={result?.text ?? null} kind={result?.kind} />
    </form>
  );
}

export function Field(props: {
  label: string;
  name: string;
  id?: string;
  value: string;
  onInput: (v: string) => void;
  type?: 'text' | 'email' | 'datetime-local';
  required?: boolean;
  placeholder?: string;
  focus?: boolean;
  autoComplete?: string;
  inputMode?: 'numeric';
}) {
  const id = props.id ?? `f-${props.name}`;
  const ref = useRef<HTMLInputElement>(null);
  // A field that replaces the one just submitted takes the focus, so keyboard and screen-reader users land on it.
  useEffect(() => {
    if (props.focus) ref.current?.focus();
  }, []);
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <input
        ref={ref}
        id={id}
        name={props.name}
        autoComplete={props.autoComplete}
        inputMode={props.inputMode}
        type={(props.type ?? 'text') as 'text'}
        value={props.value}
        required={props.required}
        placeholder={props.placeholder}
        onInput={(e) => props.onInput((e.target as HTMLInputElement).value)}
      />
    </div>
  );
}

export function Table(props: { caption: string; head: string[]; rows: ComponentChildren[][]; empty?: string }) {
  if (props.rows.length === 0) return <p class="empty">{props.empty ?? 'Nothing yet.'}</p>;
  return (
    <div class="scroll" role="region" aria-label={props.caption} tabIndex={0}>
      <table>
        <caption>{props.caption}</caption>
        <thead>
          <tr>
            {props.head.map((h) => (
              <th scope="col">{h}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.rows.map((r) => (
            <tr>
              {r.map((c) => (
                <td>{c}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—');

export function Secret(props: { title: string; lines: string[] }) {
  return (
    <div class="secret" role="status">
      <strong>{props.title}</strong> — shown once, copy it now:
      <pre>{props.lines.join('\n')}</pre>
    </div>
  );
}

/** An id people can tell apart: its random tail (the whole id on hover and for screen readers) and a copy button. */
export function CopyId({ id, label }: { id: string; label: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <span class="copy-id">
      <code title={id}>{shortId(id)}</code>{' '}
      <button
        type="button"
        class="link"
        aria-label={`Copy ${label}`}
        onClick={async () => {
          await navigator.clipboard?.writeText(id).catch(() => undefined);
          setCopied(true);
        }}
      >
        {copied ? 'Copied' : 'Copy'}
      </button>
    </span>
  );
}
