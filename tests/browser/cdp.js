// Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
// NUL-separated JSON on fds 3 and 4; node's standard library only), for the browser checks
// (flamegraph_check.js, html_check.js). Prints "PASS name" / "FAIL name: why" lines.
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

function start(chromium, tag) {
  let failures = 0;
  const pass = (n) => console.log('PASS ' + n);
  const fail = (n, why) => { console.log('FAIL ' + n + ': ' + why); failures++; };
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'memtrace-chromium-'));
  const browser = spawn(chromium, [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run',
    '--user-data-dir=' + profile, '--remote-debugging-pipe', 'about:blank',
  ], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
  let stderr = '';
  browser.stderr.on('data', (d) => { stderr += d; });
  const toBrowser = browser.stdio[3], fromBrowser = browser.stdio[4];

  let nextId = 1;
  const waiting = new Map();
  const listeners = [];
  let buffered = '';
  fromBrowser.on('data', (chunk) => {
    buffered += chunk.toString('utf8');
    let end;
    while ((end = buffered.indexOf('\0')) >= 0) {
      const msg = JSON.parse(buffered.slice(0, end));
      buffered = buffered.slice(end + 1);
      if (msg.id && waiting.has(msg.id)) {
        const { resolve, reject } = waiting.get(msg.id);
        waiting.delete(msg.id);
        if (msg.error) reject(new Error(JSON.stringify(msg.error)));
        else resolve(msg.result);
      } else if (msg.method) {
        for (const l of listeners) l(msg);
      }
    }
  });
  function send(method, params = {}, sessionId) {
    const id = nextId++;
    const msg = { id, method, params };
    if (sessionId) msg.sessionId = sessionId;
    toBrowser.write(JSON.stringify(msg) + '\0');
    return new Promise((resolve, reject) => waiting.set(id, { resolve, reject }));
  }
  function once(method) {
    return new Promise((resolve) => {
      const l = (msg) => {
        if (msg.method === method) { listeners.splice(listeners.indexOf(l), 1); resolve(msg.params); }
      };
      listeners.push(l);
    });
  }

  // A hang guard, not a timing assertion: a browser that never answers fails the test.
  const guard = setTimeout(() => {
    fail(tag, 'Chromium did not answer within 120 s; stderr: ' + stderr.slice(-500));
    finish();
  }, 120000);

  async function finish() {
    clearTimeout(guard);
    if (browser.exitCode === null && browser.signalCode === null) {
      const exited = new Promise((resolve) => browser.once('exit', resolve));
      browser.kill('SIGTERM'); // after Browser.close this finds it already on its way out
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 10000))]);
    }
    try { fs.rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 }); }
    catch (e) { console.error('could not remove ' + profile + ': ' + e.message); }
    process.exit(failures ? 1 : 0);
  }


  // console errors, exceptions and error log entries of the page
  const errors = [];
  listeners.push((msg) => {
    const p = msg.params || {};
    if (msg.method === 'Runtime.exceptionThrown')
      errors.push('exception: ' + (p.exceptionDetails.exception?.description || p.exceptionDetails.text));
    if (msg.method === 'Runtime.consoleAPICalled' && (p.type === 'error' || p.type === 'assert'))
      errors.push('console.' + p.type + ': ' + p.args.map((a) => a.value ?? a.description).join(' '));
    if (msg.method === 'Log.entryAdded' && p.entry.level === 'error')
      errors.push('log: ' + p.entry.text + (p.entry.url ? ' (' + p.entry.url + ')' : ''));
  });
  // a page opened at url, 1200 px wide: s (a command to it) and evalValue (an expression's value)
  async function openPage(url) {
    const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
    const s = (m, p) => send(m, p, sessionId);
    await s('Runtime.enable');
    await s('Log.enable');
    await s('Page.enable');
    await s('Emulation.setDeviceMetricsOverride', { width: 1200, height: 800, deviceScaleFactor: 1, mobile: false });
    const loaded = once('Page.loadEventFired');
    const t0 = Date.now();
    await s('Page.navigate', { url });
    await loaded; /* (after the page's own scripts ran) */
    const openMs = Date.now() - t0;
    const evalValue = async (expr) => {
      const r = await s('Runtime.evaluate', { expression: expr, returnByValue: true, awaitPromise: true });
      if (r.exceptionDetails) throw new Error('evaluate failed: ' + JSON.stringify(r.exceptionDetails));
      return r.result.value;
    };
    return { s, evalValue, openMs };
  }
  // the whole page as a PNG at pngPath
  async function screenshot(s, evalValue, pngPath) {
    const height = await evalValue('document.documentElement.getBoundingClientRect().height');
    await s('Emulation.setDeviceMetricsOverride', { width: 1200, height: Math.ceil(height), deviceScaleFactor: 1, mobile: false });
    const shot = await s('Page.captureScreenshot', { format: 'png' });
    fs.writeFileSync(pngPath, Buffer.from(shot.data, 'base64'));
  }
  async function close() {
    const exited = new Promise((resolve) => browser.once('exit', resolve));
    try { await send('Browser.close'); } catch (e) { /* closing anyway */ }
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 10000))]);
  }
  const failed = () => failures;
  return { pass, fail, send, once, errors, openPage, screenshot, close, finish, failed,
           stderr: () => stderr };
}

module.exports = { start };
