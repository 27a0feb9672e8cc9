"""WebRTC does not go around the policy proxy: a page's RTCPeerConnection sends no UDP.

A network namespace joined to this one by a veth pair stands in for a private network
(10.x): a real UDP listener there counts every packet that reaches it. The page, on
loopback, names the listener as its STUN and TURN server and as a remote peer's host
candidate, so a Chromium that sends UDP sends STUN binding requests, TURN allocations and
ICE connectivity checks (the page's own data in their usernames) to it. With linewise's
Chromium it receives nothing, under the default policy and with an allowlist naming the
page's host; the same page on a Chromium launched without the WebRTC setting reaches it,
so each zero is the setting's doing. TURN over TCP, the one way WebRTC still has, goes
through the proxy, which refuses the private address.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from linewise.runtime.browser import chromium
from linewise.runtime.browser.chromium import Browser, BrowserConfig, BrowserSession
from linewise.runtime.browser.guard import NavigationGuard
from linewise.runtime.browser.navigation import NavigationPolicy
from linewise.settings import NavigationSettings
from tests.support.sites import Site

STUN_PORT, PEER_PORT = 3478, 3479

# Runs inside the namespace: counts every UDP datagram on the two ports and every TCP
# connection on the STUN port (TURN over TCP), one line each.
LISTENER = r"""
import select, socket, sys
address, ports = sys.argv[1], [int(p) for p in sys.argv[2:]]
udp = []
for port in ports:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((address, port))
    udp.append(s)
tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
tcp.bind((address, ports[0]))
tcp.listen(16)
print("ready", flush=True)
while True:
    for s in select.select([*udp, tcp], [], [])[0]:
        if s is tcp:
            s.accept()[0].close()
            print("tcp", ports[0], flush=True)
        else:
            data, source = s.recvfrom(65536)
            print("udp", s.getsockname()[1], source[0], len(data), flush=True)
"""

PAGE = """<html><head><title>t</title></head><body><h1>Peer</h1><script>
(async () => {{
  const pc = new RTCPeerConnection({{iceServers: [
    {{urls: 'stun:{peer}:{stun}'}},
    {{urls: 'turn:{peer}:{stun}?transport=udp', username: 'page-secret', credential: 'x'}},
    {{urls: 'turn:{peer}:{stun}?transport=tcp', username: 'page-secret', credential: 'x'}},
  ]}});
  window.kinds = [];
  pc.onicecandidate = (e) => {{ if (e.candidate) kinds.push(e.candidate.type); }};
  const gathered = new Promise((done) => {{
    pc.onicegatheringstatechange = () => {{
      if (pc.iceGatheringState === 'complete') done(); }};
    setTimeout(done, 8000);
  }});
  pc.createDataChannel('leak');
  await pc.setLocalDescription(await pc.createOffer());
  // A made-up peer whose only candidate is the listener: ICE checks go there.
  const other = new RTCPeerConnection();
  await other.setRemoteDescription(pc.localDescription);
  await other.setLocalDescription(await other.createAnswer());
  await pc.setRemoteDescription(other.localDescription);
  await pc.addIceCandidate({{candidate: 'candidate:1 1 udp 2122260223 {peer} {remote} typ host',
                            sdpMid: '0'}});
  await gathered;
  await new Promise((done) => setTimeout(done, 1500));
  document.title = 'done';
}})().catch((e) => {{ document.title = 'done'; window.failed = String(e); }});
</script></body></html>"""


@dataclass
class PrivatePeer:
    """A UDP (and TCP) listener on a private address in its own network namespace."""

    address: str
    listener: subprocess.Popen[str]
    received: Counter[str] = field(default_factory=Counter)

    def count(self) -> Counter[str]:
        """What reached the listener, by protocol and port (``udp 3478``); stops it."""
        self.listener.terminate()
        out, _ = self.listener.communicate(timeout=10)
        for line in out.splitlines():  # "ready" was read by the fixture
            self.received[" ".join(line.split()[:2])] += 1
        return self.received


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=10)


@pytest.fixture
def private_peer() -> Iterator[PrivatePeer]:
    if shutil.which("ip") is None:
        pytest.skip("no `ip` command: cannot make a network namespace")
    tag = secrets.token_hex(3)
    namespace, outside, inside = f"lw-rtc-{tag}", f"lwrtc{tag}a", f"lwrtc{tag}b"
    try:
        _ip("netns", "add", namespace)
    except (subprocess.CalledProcessError, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        pytest.skip(f"`ip netns add` is not permitted here: {detail.strip()}")
    listener: subprocess.Popen[str] | None = None
    try:
        octet = 1 + int(tag[:2], 16) % 250
        here, there = f"10.213.{octet}.1", f"10.213.{octet}.2"
        _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        _ip("link", "set", inside, "netns", namespace)
        _ip("addr", "add", f"{here}/30", "dev", outside)
        _ip("link", "set", outside, "up")
        _ip("-n", namespace, "addr", "add", f"{there}/30", "dev", inside)
        _ip("-n", namespace, "link", "set", inside, "up")
        _ip("-n", namespace, "link", "set", "lo", "up")
        listener = subprocess.Popen(
            ["ip", "netns", "exec", namespace, sys.executable, "-u", "-c", LISTENER, there,
             str(STUN_PORT), str(PEER_PORT)],
            stdout=subprocess.PIPE, text=True, env={"PATH": os.environ.get("PATH", "")})
        assert listener.stdout is not None
        assert listener.stdout.readline().strip() == "ready"
        yield PrivatePeer(there, listener)
    finally:
        if listener is not None and listener.poll() is None:
            listener.kill()
            listener.wait(timeout=10)
        with contextlib.suppress(subprocess.CalledProcessError, OSError):
            _ip("link", "del", outside)  # its peer goes with it
        with contextlib.suppress(subprocess.CalledProcessError, OSError):
            _ip("netns", "del", namespace)


@pytest.fixture
def peer_site(private_peer: PrivatePeer) -> Iterator[Site]:
    site = Site({"/peer": (200, {}, PAGE)})
    site.fill = {"peer": private_peer.address, "stun": str(STUN_PORT),
                 "remote": str(PEER_PORT)}
    try:
        yield site
    finally:
        site.close()


async def _run_page(browser: Browser, site: Site, **navigation: object
                    ) -> tuple[BrowserSession, list[str]]:
    start = f"http://127.0.0.1:{site.port}/"
    policy = NavigationPolicy.for_task(NavigationSettings.model_validate(navigation), start,
                                       devtools_port=browser.devtools_port)
    session = await browser.new_session(NavigationGuard(policy))
    try:
        await session.page.goto(f"{start}peer")
        await session.page.wait_for_function("document.title === 'done'", timeout=20000)
        assert await session.page.evaluate("window.failed || null") is None
        kinds: list[str] = await session.page.evaluate("window.kinds")
    finally:
        await session.close()
    return session, kinds


@pytest.mark.slow
@pytest.mark.parametrize("navigation", [{}, {"allow_domains": ("127.0.0.1",)},
                                        {"allow_private": True}],
                         ids=["default", "allowlist", "allow-private"])
async def test_a_page_sends_no_udp_to_a_private_address(
    browser: Browser, private_peer: PrivatePeer, peer_site: Site,
    navigation: dict[str, object],
) -> None:
    _, kinds = await _run_page(browser, peer_site, **navigation)
    received = private_peer.count()
    assert not [k for k in received if k.startswith("udp")], received
    assert set(kinds) <= {"relay"}, kinds  # no host, no server-reflexive candidate
    if not navigation.get("allow_private"):
        assert not received, received  # TURN over TCP: through the proxy, refused


@pytest.mark.slow
async def test_turn_over_tcp_goes_through_the_proxy(
    browser: Browser, private_peer: PrivatePeer, peer_site: Site,
) -> None:
    """With the policy widened, the proxy connects the TCP TURN allocation: WebRTC's one
    way out is the proxy's to decide, and it still sends no UDP."""
    await _run_page(browser, peer_site, allow_private=True)
    received = private_peer.count()
    assert received[f"tcp {STUN_PORT}"] >= 1, received
    assert not [k for k in received if k.startswith("udp")], received


EXECUTABLES = [
    pytest.param("/usr/bin/chromium", id="browser"),
    pytest.param("/usr/bin/chromium-headless-shell", id="headless-shell", marks=pytest.mark.skipif(
        not os.access("/usr/bin/chromium-headless-shell", os.X_OK),
        reason="Chromium's headless shell is not installed (linewise setup adds it)")),
]
"""Each kind of Chromium reads its own switch (``chromium.WEBRTC_POLICY``): both are
checked, whichever the session's browser is."""


@pytest.mark.slow
@pytest.mark.parametrize("executable", EXECUTABLES)
async def test_each_kind_of_chromium_sends_no_udp(
    executable: str, private_peer: PrivatePeer, peer_site: Site,
) -> None:
    async with Browser(BrowserConfig(chromium=executable)) as browser:
        assert browser.executable_path == executable
        _, kinds = await _run_page(browser, peer_site)
    received = private_peer.count()
    assert not received, received
    assert set(kinds) <= {"relay"}, kinds


@pytest.mark.slow
@pytest.mark.parametrize("executable", EXECUTABLES)
async def test_without_the_setting_the_same_page_reaches_the_listener(
    executable: str, private_peer: PrivatePeer, peer_site: Site,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The control: a Chromium launched without the WebRTC setting sends the listener
    STUN, TURN and ICE packets from the same page, through the same proxy."""
    monkeypatch.setattr(chromium, "CHROMIUM_ARGS", tuple(
        a for a in chromium.CHROMIUM_ARGS if a not in chromium.WEBRTC_POLICY))
    async with Browser(BrowserConfig(chromium=executable)) as plain:
        await _run_page(plain, peer_site)
    received = private_peer.count()
    assert received[f"udp {STUN_PORT}"] >= 1 and received[f"udp {PEER_PORT}"] >= 1, received
