// The page of a big trace (issue 38: clang's flame graph was 2,400 px tall, the table of sites
// 2,800 px down, flame-graph labels cut to "v8::internal.."), in headless Chromium (cdp.js) at
// 1200x800: the table of sites starts in the first screen; each flame graph sits in a box of
// bounded height that scrolls (the graph itself is taller); every label fits its frame's box,
// and some are shortened forms of their names (no parameters, no template arguments, fewer
// namespaces) where the name did not fit; the timeline's legend names each series; no console
// error; a screenshot at PNG_OUT.
//
// usage: node html_scale_check.js CHROMIUM HTML PNG_OUT MIN_SERIES
'use strict';
const path = require('path');
const { start } = require('./cdp');

const [chromium, htmlPath, pngPath, minSeries] = process.argv.slice(2);
if (!chromium || !htmlPath || !pngPath) {
  console.log('FAIL html_scale_browser: usage: html_scale_check.js CHROMIUM HTML PNG MIN_SERIES');
  process.exit(2);
}
const B = start(chromium, 'html_scale_browser');
const { pass, fail } = B;

async function main() {
  const { s, evalValue } = await B.openPage('file://' + path.resolve(htmlPath));
  const top = await evalValue("document.getElementById('sites').getBoundingClientRect().top + window.scrollY");
  const rows = await evalValue("document.querySelectorAll('#sites tbody tr').length");
  if (top < 800 && rows > 0) pass('html_scale_table_in_the_first_screen');
  else fail('html_scale_table_in_the_first_screen', `the table starts ${top} px down, ${rows} rows`);
  const box = await evalValue(`(() => { const svg = document.getElementById('flame-live');
      return { pane: svg.parentElement.getBoundingClientRect().height, svg: +svg.getAttribute('height') }; })()`);
  if (box.svg > box.pane && box.pane <= 730) pass('html_scale_flame_graph_in_a_bounded_box');
  else fail('html_scale_flame_graph_in_a_bounded_box', `box ${box.pane} px, graph ${box.svg} px`);
  const labels = await evalValue(`Array.from(document.querySelectorAll('.flame g.frame')).filter((g) => g.querySelector('text')).map((g) => {
      const t = g.querySelector('text'), r = g.querySelector('rect');
      return { name: g.getAttribute('data-name'), label: t.textContent, len: t.getComputedTextLength(), w: +r.getAttribute('width') }; })`);
  const over = labels.filter((l) => l.len > l.w - 2);
  if (labels.length > 0 && over.length === 0) pass('html_scale_labels_fit_their_boxes');
  else fail('html_scale_labels_fit_their_boxes', `${over.length} of ${labels.length} labels overflow, e.g. ${JSON.stringify(over[0] || null)}`);
  const shortened = labels.filter((l) => l.label !== l.name);
  const named = shortened.filter((l) => !l.label.endsWith('\u2026') && l.name.includes(l.label.split('::').pop()));
  if (named.length > 0 && !labels.some((l) => l.label.endsWith('..'))) pass('html_scale_labels_shortened_to_names');
  else fail('html_scale_labels_shortened_to_names', `${shortened.length} shortened, ${named.length} to a shorter form of the name: ${JSON.stringify(shortened.slice(0, 3))}`);
  const legend = await evalValue("Array.from(document.querySelectorAll('#legend .item')).map((i) => i.textContent)");
  const series = await evalValue("document.querySelectorAll('#timeline path.series').length");
  if (legend.length === series && series >= Number(minSeries || 1) && legend.every((t) => t.length > 0)) pass('html_scale_timeline_legend');
  else fail('html_scale_timeline_legend', `${legend.length} legend items for ${series} series: ${legend.join(', ')}`);
  await B.screenshot(s, evalValue, pngPath);
  pass('html_scale_screenshot');
  if (B.errors.length) fail('html_scale_no_console_error', B.errors.join('; '));
  else pass('html_scale_no_console_error');
  await B.close();
}

main().then(B.finish, (e) => { fail('html_scale_browser', e.message + '; stderr: ' + B.stderr().slice(-500)); B.finish(); });
