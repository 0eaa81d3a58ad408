"""The scale-out deployment: the five graphs on Aegra over PostgreSQL and a Chroma server."""
