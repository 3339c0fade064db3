"""The shared types every layer speaks: Op and its StageContext, Target, Artifact,
DatasetRef, digests. Imports nothing heavy and no other edgebuild package but errors."""
