
J
4
ed0e56ab8b2a0ecb 84cb01c0ad11d1bb28ac788d0737e041
fe9062d0fff82a66C
@€@(08@X(a77e7c793abc0d0c923a9afb275058e2fe57a198