"""What a served caller may list: the documents of its own namespaces (``GET /documents``).

LangServe (:mod:`surfaces.serve`) and the Aegra app (:mod:`deploy.app`) answer the same request the
same way: ``?namespace=NS`` names one of the key's namespaces (none: its first); another tenant's
is refused (403) before anything is read. ``longdoc docs`` lists a namespace the same way.
"""

from __future__ import annotations

from typing import Any

from nodes.ingest_dir import superseded_documents
from stores.documents import document_listing
from surfaces.access import Tenant


def namespace_listing(namespace: str) -> list[dict[str, Any]]:
    """The documents of ``namespace`` (:func:`stores.documents.document_listing`) that workflows read.

    Not the earlier versions of files ingested again, queued for removal (:mod:`surfaces.superseded`).
    """
    old = set(superseded_documents(namespace))
    return [row for row in document_listing(namespace) if row["doc_id"] not in old]


def served_listing(tenant: Tenant, requested: str = "") -> dict[str, Any]:
    """The documents of the namespace ``requested`` (default: the tenant's first); AccessError outside the tenant."""
    namespace = tenant.namespace_for(requested)
    return {"namespace": namespace, "documents": namespace_listing(namespace)}
