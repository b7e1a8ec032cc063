// Opens a flame graph SVG written by memtrace-flamegraph in headless Chromium, driven over the
// DevTools protocol on a pipe (--remote-debugging-pipe: NUL-separated JSON on fds 3 and 4;
// node's standard library only), reads the rendered frames back and checks them.
//
// usage: node flamegraph_check.js CHROMIUM SVG PNG_OUT name=bytes [name=bytes ...]
//   name=bytes: a frame name and the bytes it must stand for (summed over every frame of
//   that name); its rendered width must be that share of the root frame's width within 5%.
// Prints one "PASS name" / "FAIL name: why" line per check (tests/run.sh protocol).
'use strict';
const path = require('path');
const { start } = require('./cdp');

const [chromium, svgPath, pngPath, ...expectArgs] = process.argv.slice(2);
if (!chromium || !svgPath || !pngPath) {
  console.log('FAIL flamegraph_browser: usage: flamegraph_check.js CHROMIUM SVG PNG name=bytes...');
  process.exit(2);
}
const expected = expectArgs.map((a) => {
  const i = a.lastIndexOf('=');
  return { name: a.slice(0, i), bytes: Number(a.slice(i + 1)) };
});

const B = start(chromium, 'flamegraph_browser');
const { pass, fail } = B;

async function main() {
  const { s, evalValue } = await B.openPage('file://' + path.resolve(svgPath));
  const readFrames = () => evalValue(`Array.from(document.querySelectorAll('g.f'))
      .filter((g) => g.style.display !== 'none')
      .map((g) => { const b = g.querySelector('rect').getBoundingClientRect();
        return { n: g.dataset.n, d: +g.dataset.d, w: b.width, x: b.x, y: b.y, h: b.height,
                 label: g.querySelector('text').textContent }; })`);

  const isSvg = await evalValue('document.documentElement.tagName');
  if (isSvg === 'svg') pass('flamegraph_browser_loads_svg');
  else fail('flamegraph_browser_loads_svg', 'document element is ' + isSvg);

  let frames = await readFrames();
  const root = frames.find((f) => f.d === 0);
  if (root && root.w > 1000) pass('flamegraph_root_frame');
  else fail('flamegraph_root_frame', 'no root frame of full width: ' + JSON.stringify(root));
  const total = expected.reduce((a, e) => a + e.bytes, 0);
  for (const e of expected) {
    const mine = frames.filter((f) => f.n === e.name);
    const width = mine.reduce((a, f) => a + f.w, 0);
    const want = root ? root.w * e.bytes / total : 0;
    const name = 'flamegraph_width_' + e.name;
    if (!mine.length) fail(name, 'no rendered frame named ' + e.name);
    else if (Math.abs(width - want) <= 0.05 * want) pass(name);
    else fail(name, `rendered width ${width.toFixed(1)} px, want ${want.toFixed(1)} px (+-5%)`);
  }
  const labelled = frames.filter((f) => f.w > 100 && f.label.length > 0).length;
  if (labelled > 0) pass('flamegraph_labels_drawn');
  else fail('flamegraph_labels_drawn', 'no frame wider than 100 px has a label');

  // hover: the details line names the frame under the mouse
  const first = expected.length ? frames.find((f) => f.n === expected[0].name) : null;
  if (first) {
    await s('Input.dispatchMouseEvent', { type: 'mouseMoved', x: first.x + first.w / 2, y: first.y + first.h / 2 });
    const details = await evalValue("document.getElementById('details').textContent");
    if (details.includes(first.n) && /\d/.test(details)) pass('flamegraph_hover_details');
    else fail('flamegraph_hover_details', 'details line says "' + details + '"');

    // click to zoom: the clicked frame fills the width, its ancestors too
    await s('Input.dispatchMouseEvent', { type: 'mousePressed', x: first.x + first.w / 2, y: first.y + first.h / 2, button: 'left', clickCount: 1 });
    await s('Input.dispatchMouseEvent', { type: 'mouseReleased', x: first.x + first.w / 2, y: first.y + first.h / 2, button: 'left', clickCount: 1 });
    const zoomed = await readFrames();
    const z = zoomed.find((f) => f.n === first.n && f.d === first.d);
    if (z && root && Math.abs(z.w - root.w) < 1 && zoomed.length < frames.length) pass('flamegraph_click_zoom');
    else fail('flamegraph_click_zoom', 'after the click the frame is ' + JSON.stringify(z));
    await evalValue('window.flamegraph.resetZoom(), 0');
    const reset = await readFrames();
    if (reset.length === frames.length) pass('flamegraph_reset_zoom');
    else fail('flamegraph_reset_zoom', `${reset.length} frames shown after reset, ${frames.length} before`);

    // search: the share of matched frames equals the site's share of bytes
    const pct = await evalValue(`window.flamegraph.search(${JSON.stringify('^' + first.n + '$')})`);
    const wantPct = 100 * expected[0].bytes / total;
    const shown = await evalValue("document.getElementById('matched').textContent");
    if (Math.abs(pct - wantPct) <= 0.05 * wantPct && shown.startsWith('Matched')) pass('flamegraph_search');
    else fail('flamegraph_search', `matched ${pct}% ("${shown}"), want ${wantPct.toFixed(2)}%`);
    await evalValue("window.flamegraph.search(''), 0");
  }

  await B.screenshot(s, evalValue, pngPath);
  pass('flamegraph_screenshot');

  if (B.errors.length) fail('flamegraph_no_console_error', B.errors.join('; '));
  else pass('flamegraph_no_console_error');
  await B.close();
}

main().then(B.finish, (e) => { fail('flamegraph_browser', e.message + '; stderr: ' + B.stderr().slice(-500)); B.finish(); });
