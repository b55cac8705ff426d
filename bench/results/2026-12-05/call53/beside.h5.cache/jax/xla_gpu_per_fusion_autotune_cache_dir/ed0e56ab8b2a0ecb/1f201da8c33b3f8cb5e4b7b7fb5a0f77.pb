
J
4
ed0e56ab8b2a0ecb 1f201da8c33b3f8cb5e4b7b7fb5a0f77
fe9062d0fff82a66A
	
ç ((a77e7c793abc0d0c923a9afb275058e2fe57a198