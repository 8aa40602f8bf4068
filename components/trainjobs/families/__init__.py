"""One module per framework family: what it reserves and checks, its roles and env, its extra objects
and its outputs. The core drives them through the `Family` hooks and knows none of them."""
