/**
 * THE way the web UI makes HTML: the `html` template tag escapes every
 * interpolated value unless it is already SafeHtml (made by `html` itself).
 * Arrays are joined, and
 * null, undefined and false render as nothing, so templates can map and
 * branch inline. Nothing else in src/web builds markup from strings.
 */
export class SafeHtml {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

export type Renderable = SafeHtml | string | number | null | undefined | false | readonly Renderable[];

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

function render(value: Renderable): string {
  if (value instanceof SafeHtml) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: Renderable[]): SafeHtml {
  return new SafeHtml(strings.reduce((out, part, i) => out + part + (i < values.length ? render(values[i]!) : ''), ''));
}
