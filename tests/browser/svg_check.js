// Opens an SVG (memtrace-timeline's chart) in headless Chromium (cdp.js): it loads as SVG with
// no console error, each SELECTOR=N names at least N elements, and the peak marker's circle
// sits at the height of PEAK_BYTES on the chart's byte axis (read from the axis's tick labels)
// within 2 px; a screenshot at PNG_OUT.
//
// usage: node svg_check.js CHROMIUM SVG PNG_OUT TAG PEAK_BYTES [SELECTOR=N ...]
'use strict';
const path = require('path');
const { start } = require('./cdp');

const [chromium, svgPath, pngPath, tag, peakArg, ...counts] = process.argv.slice(2);
if (!chromium || !svgPath || !pngPath || !tag) {
  console.log('FAIL svg_browser: usage: svg_check.js CHROMIUM SVG PNG TAG PEAK_BYTES SELECTOR=N...');
  process.exit(2);
}
const B = start(chromium, tag + '_browser');
const { pass, fail } = B;
const units = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3, TiB: 1024 ** 4 };

async function main() {
  const { s, evalValue } = await B.openPage('file://' + path.resolve(svgPath));
  const root = await evalValue('document.documentElement.tagName');
  if (root === 'svg') pass(tag + '_loads_svg'); else fail(tag + '_loads_svg', 'document element is ' + root);
  for (const c of counts) {
    const i = c.lastIndexOf('='), sel = c.slice(0, i), want = Number(c.slice(i + 1));
    const n = await evalValue(`document.querySelectorAll(${JSON.stringify(sel)}).length`);
    if (n >= want) pass(tag + '_has_' + sel.replace(/[^a-z0-9]+/gi, '_').replace(/^_|_$/g, ''));
    else fail(tag + '_has_' + sel.replace(/[^a-z0-9]+/gi, '_').replace(/^_|_$/g, ''), `${n} elements, want ${want}`);
  }
  // the byte axis: tick labels "12.0 MiB" at their y; the peak circle's y against them
  const ticks = await evalValue(`Array.from(document.querySelectorAll('text[text-anchor=end]'))
      .map((t) => ({ s: t.textContent, y: +t.getAttribute('y') - 4 }))`);
  const vals = ticks.map((t) => { const m = /^([0-9.]+) (B|KiB|MiB|GiB|TiB)$/.exec(t.s); return m ? { v: m[1] * units[m[2]], y: t.y } : null; })
    .filter(Boolean).sort((a, b) => a.v - b.v);
  const cy = await evalValue("+(document.querySelector('g.peak circle')?.getAttribute('cy') ?? NaN)");
  if (vals.length >= 2 && isFinite(cy)) {
    const lo = vals[0], hi = vals[1]; /* the two lowest ticks: labels of one decimal are exact there */
    const want = lo.y + (Number(peakArg) - lo.v) / (hi.v - lo.v) * (hi.y - lo.y);
    if (Math.abs(cy - want) <= 2) pass(tag + '_peak_at_its_height');
    else fail(tag + '_peak_at_its_height', `circle at y=${cy}, the axis puts ${peakArg} bytes at y=${want.toFixed(1)}`);
  } else fail(tag + '_peak_at_its_height', 'no axis labels or no peak marker');
  await B.screenshot(s, evalValue, pngPath);
  pass(tag + '_screenshot');
  if (B.errors.length) fail(tag + '_no_console_error', B.errors.join('; '));
  else pass(tag + '_no_console_error');
  await B.close();
}

main().then(B.finish, (e) => { fail(tag + '_browser', e.message + '; stderr: ' + B.stderr().slice(-500)); B.finish(); });
