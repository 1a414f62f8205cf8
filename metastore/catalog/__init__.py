"""The catalog: immutable image, resolved commands, the pure apply, validation against a snapshot."""
