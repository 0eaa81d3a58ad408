"""What a served caller may list: the documents of its own namespaces (``GET /documents``).

LangServe (:mod:`surfaces.serve`) and the Aegra app (:mod:`deploy.app`) answer the same request the
same way: ``?namespace=NS`` names one of the key's namespaces (none: its first); another tenant's
is refused (403) before anything is read.
"""

from __future__ import annotations

from typing import Any

from stores.documents import document_listing
from surfaces.access import Tenant


def served_listing(tenant: Tenant, requested: str = "") -> dict[str, Any]:
    """The documents of the namespace ``requested`` (default: the tenant's first); AccessError outside the tenant."""
    namespace = tenant.namespace_for(requested)
    return {"namespace": namespace, "documents": document_listing(namespace)}
