
J
4
ed0e56ab8b2a0ecb 097466a54cbec98ad1e1d60d9e0762e9
fe9062d0fff82a66B
@@ (08@X(a77e7c793abc0d0c923a9afb275058e2fe57a198