
J
4
ed0e56ab8b2a0ecb 81acb8e13c6eb8d02b4dace93feaf5a5
fe9062d0fff82a66C
@€@(08@X(a77e7c793abc0d0c923a9afb275058e2fe57a198