"""Documents, chunking, embedders, vector stores, model endpoints, caches, settings and run deadlines."""
