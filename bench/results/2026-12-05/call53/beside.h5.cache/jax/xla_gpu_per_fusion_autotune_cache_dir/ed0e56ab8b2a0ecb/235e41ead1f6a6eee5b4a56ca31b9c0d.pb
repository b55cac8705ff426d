
J
4
ed0e56ab8b2a0ecb 235e41ead1f6a6eee5b4a56ca31b9c0d
fe9062d0fff82a66B
@@ (08@X(a77e7c793abc0d0c923a9afb275058e2fe57a198