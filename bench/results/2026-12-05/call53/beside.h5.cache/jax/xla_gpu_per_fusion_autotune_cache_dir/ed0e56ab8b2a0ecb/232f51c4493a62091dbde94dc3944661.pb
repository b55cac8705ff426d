
J
4
ed0e56ab8b2a0ecb 232f51c4493a62091dbde94dc3944661
fe9062d0fff82a66@
	
 ((a77e7c793abc0d0c923a9afb275058e2fe57a198