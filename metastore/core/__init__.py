"""The bottom layer, which every other imports: the root exception and its shared subclasses,
the bounds every request and record is held to, the fault hooks tests inject, and the command
log's JSON record codec."""
