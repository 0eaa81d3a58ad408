"""What counts as this machine for ``langgraph dev``: loopback names, loopback addresses, and the peers it answers.

The dev server has no keys: it answers this machine only. Whether a request comes from this machine is judged by
the address of the peer of its connection (ASGI ``client``, as the server's socket gives it), never by a header the
caller writes: a machine on the network that sends ``Host: localhost`` is still on the network. Peers on other
machines the operator trusts (the host of a container the server runs in, say) are named in
``LONGDOC_DEV_CLIENTS``: addresses or networks, comma-separated (``172.17.0.1``, ``192.168.1.0/24``).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from stores.errors import InputError
from stores.settings import get_settings

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})
"""The names a request for this machine gives as its ``Host``."""


def host_name(value: str) -> str:
    """The host of a ``Host`` header (``[::1]:2025`` -> ``[::1]``)."""
    if value.startswith("["):
        return value.split("]", 1)[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def loopback_address(address: str) -> bool:
    """127.0.0.0/8, ::1 or an IPv4-mapped loopback address (an ASGI server's own address)."""
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return address == "localhost"
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


def listed_clients() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """The networks ``LONGDOC_DEV_CLIENTS`` lists (an address is a network of one); InputError for one that is not."""
    listed = get_settings().dev_clients or ""
    try:
        return [ipaddress.ip_network(item.strip(), strict=False) for item in listed.split(",") if item.strip()]
    except ValueError as exc:
        raise InputError(f"LONGDOC_DEV_CLIENTS: {exc}") from None


def answered_peer(client: Any, server: Any = None) -> bool:
    """Whether the dev server answers a request whose connection's peer is ``client`` (ASGI ``(host, port)``).

    A loopback address is this machine; another address is answered only when ``LONGDOC_DEV_CLIENTS`` lists it. A
    request without a peer address is answered only on a unix socket (ASGI ``server`` a path or none, as uvicorn
    gives it there), which only this machine's processes reach; on a network socket nothing says where it is from.
    """
    address = str(client[0]) if isinstance(client, list | tuple) and client else ""
    if not address:
        return server is None or (isinstance(server, list | tuple) and len(server) == 2 and server[1] is None)
    if loopback_address(address):
        return True
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return any((mapped or ip) in network for network in listed_clients())
