"""Aegra's auth handler: API keys name tenants, with the key ring of :mod:`surfaces.access`.

``aegra.json`` points Aegra at :data:`auth`. The tenant's name is the user ``identity``, so Aegra's
own per-user filters (threads, runs, state, history are looked up ``WHERE user_id = identity``)
confine a tenant to the threads it created. Assistants and Aegra's key-value store are the
operator's: tenants may read the five built-in assistants, never create, change or delete one
(an assistant's config could otherwise set a model endpoint), and may not use the store (the
graphs keep their data in Chroma). Run creation is checked by :mod:`deploy.app` (namespaces,
foreign thread ids), because Aegra 0.6 calls no handler on ``/runs/wait`` and ``/runs/stream``.
"""

from __future__ import annotations

from typing import Any

from langgraph_sdk import Auth

from stores.cache import lru_cache
from surfaces.access import KeyRing, load_keyring

auth = Auth()


@lru_cache(maxsize=1)
def keyring() -> KeyRing:
    """The deployment's keys (``LONGDOC_SERVER_KEYS`` / ``LONGDOC_SERVER_API_KEY``), read once per process."""
    return load_keyring()


@auth.authenticate
async def authenticate(headers: dict[str, Any]) -> Auth.types.MinimalUserDict:
    """The tenant of the request's ``X-API-Key`` / ``Authorization: Bearer`` key; 401 without a valid one."""
    lowered = {str(k).lower(): v for k, v in headers.items()}
    tenant = keyring().tenant_of(lowered)
    if tenant is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="a valid API key is required")
    name = tenant.name or "anonymous"
    return {"identity": name, "display_name": name, "is_authenticated": True, "permissions": []}


@auth.on.assistants.read
async def read_assistants(ctx: Auth.types.AuthContext, value: Any) -> bool:
    """Allow every authenticated user to read assistants."""
    return True


@auth.on.assistants.search
async def search_assistants(ctx: Auth.types.AuthContext, value: Any) -> bool:
    """Allow every authenticated user to search assistants."""
    return True


@auth.on.assistants
async def change_assistants(ctx: Auth.types.AuthContext, value: Any) -> bool:
    """Creating, updating or deleting an assistant is refused (403)."""
    return False


@auth.on.store
async def refuse_store(ctx: Auth.types.AuthContext, value: Any) -> bool:
    """Aegra's key-value store is not served (403)."""
    return False
