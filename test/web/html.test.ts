import { expect, test } from 'vitest';
import { escapeHtml, html } from '../../src/web/html.ts';

test('every interpolated value is escaped, in text and in attributes', () => {
  const reason = `<script>alert("x")</script>' onmouseover='x`;
  expect(html`<p title="${reason}">${reason}</p>`.text).toBe(
    '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; onmouseover=&#39;x">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; onmouseover=&#39;x</p>',
  );
  expect(escapeHtml('a & b')).toBe('a &amp; b');
});

test('nested templates are not escaped twice; arrays join; null, undefined and false render nothing', () => {
  const items = ['<a>', 'b&'].map((x) => html`<li>${x}</li>`);
  expect(html`<ul>${items}</ul>${null}${undefined}${false}${0}`.text).toBe('<ul><li>&lt;a&gt;</li><li>b&amp;</li></ul>0');
  expect(html`${html`<br>`}`.text).toBe('<br>');
});
