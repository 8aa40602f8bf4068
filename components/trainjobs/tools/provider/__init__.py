"""The components as a Pulumi package for every language: the provider server and its schema (server),
the decoding of what the engine sends it (wire), and the argument reference generated from the same
component list (reference)."""
