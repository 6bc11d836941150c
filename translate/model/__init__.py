"""The Transformer and its tie map; its CPU fast paths (packed and int8 linear layers) beside it,
each with a plain fallback; padding; FLOP counting; the analysis of what tying shares; checkpoint
reading (weights only) and averaging. Imports text/ and the ground."""
