// Opens a page written by memtrace-html in headless Chromium (cdp.js) and checks it: the title
// and the timeline are drawn; the flame graph of what was live shows the peak at first (its root
// frame stands for PEAK_BYTES within 1%); a click on the timeline at FRACTION of its plot width
// selects another moment (its time and the root's bytes are printed as "# click T BYTES" for the
// caller to check against the trace); a search highlights frames of NAME; no console error; a
// screenshot at PNG_OUT. Prints "# open_ms N": from the navigation to the page drawn.
//
// usage: node html_check.js CHROMIUM HTML PNG_OUT PEAK_BYTES FRACTION NAME
'use strict';
const path = require('path');
const { start } = require('./cdp');

const [chromium, htmlPath, pngPath, peakArg, fracArg, name] = process.argv.slice(2);
if (!chromium || !htmlPath || !pngPath || !name) {
  console.log('FAIL html_browser: usage: html_check.js CHROMIUM HTML PNG PEAK_BYTES FRACTION NAME');
  process.exit(2);
}
const B = start(chromium, 'html_browser');
const { pass, fail } = B;

async function main() {
  const { s, evalValue, openMs } = await B.openPage('file://' + path.resolve(htmlPath));
  console.log('# open_ms ' + openMs);
  const title = await evalValue("document.getElementById('title').textContent");
  if (title.length > 0) pass('html_title'); else fail('html_title', 'no title');
  const series = await evalValue("document.querySelectorAll('#timeline path.series').length");
  if (series > 0) pass('html_timeline_drawn'); else fail('html_timeline_drawn', 'no area in the timeline');
  const rootBytes = () => evalValue("+(document.querySelector('#flame-live g.frame')?.getAttribute('data-bytes') || 0)");
  const atPeak = await rootBytes(), peak = Number(peakArg);
  const when = await evalValue("document.getElementById('when').textContent");
  if (Math.abs(atPeak - peak) <= 0.01 * peak && when.includes('peak')) pass('html_flame_at_the_peak_first');
  else fail('html_flame_at_the_peak_first', `root ${atPeak} bytes at "${when}", peak ${peak}`);
  const rows = await evalValue("document.querySelectorAll('#sites tbody tr').length");
  if (rows > 0) pass('html_table_of_sites'); else fail('html_table_of_sites', 'empty table');
  // sort by name, then back by bytes
  await evalValue("document.querySelector('#sites th[data-k=name]').click(), 0");
  const names = await evalValue("Array.from(document.querySelectorAll('#sites tbody tr td:first-child')).map((t) => t.textContent)");
  const sorted = [...names].sort((a, b) => (a < b ? 1 : a > b ? -1 : 0));
  const asc = [...names].sort();
  if (JSON.stringify(names) === JSON.stringify(asc) || JSON.stringify(names) === JSON.stringify(sorted)) pass('html_table_sortable');
  else fail('html_table_sortable', 'rows not sorted by name: ' + names.slice(0, 5).join(', '));
  // a click on the timeline: another moment, another flame graph
  const box = await evalValue(`(() => { const r = document.getElementById('timeline').getBoundingClientRect();
      return { x: r.x, y: r.y }; })()`);
  const x = box.x + 80 + Number(fracArg) * (1100 - 100), y = box.y + 120;
  await s('Input.dispatchMouseEvent', { type: 'mousePressed', x, y, button: 'left', clickCount: 1 });
  await s('Input.dispatchMouseEvent', { type: 'mouseReleased', x, y, button: 'left', clickCount: 1 });
  const when2 = await evalValue("document.getElementById('when').textContent");
  const after = await rootBytes();
  console.log(`# click ${parseFloat(when2)} ${after}`);
  if (when2 !== when) pass('html_click_selects_a_moment');
  else fail('html_click_selects_a_moment', 'still "' + when + '"');
  // search
  await evalValue(`(() => { const i = document.getElementById('search'); i.value = ${JSON.stringify(name)};
      i.dispatchEvent(new Event('input')); })()`);
  const hits = await evalValue("document.querySelectorAll('g.frame.hit').length");
  if (hits > 0) pass('html_search_highlights'); else fail('html_search_highlights', 'no frame of ' + name + ' highlighted');
  await B.screenshot(s, evalValue, pngPath);
  pass('html_screenshot');
  if (B.errors.length) fail('html_no_console_error', B.errors.join('; '));
  else pass('html_no_console_error');
  await B.close();
}

main().then(B.finish, (e) => { fail('html_browser', e.message + '; stderr: ' + B.stderr().slice(-500)); B.finish(); });
