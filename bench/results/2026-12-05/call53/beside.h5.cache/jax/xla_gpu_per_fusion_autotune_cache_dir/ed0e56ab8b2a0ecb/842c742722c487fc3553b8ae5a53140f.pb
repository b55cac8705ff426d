
J
4
ed0e56ab8b2a0ecb 842c742722c487fc3553b8ae5a53140f
fe9062d0fff82a66@
	
 ((a77e7c793abc0d0c923a9afb275058e2fe57a198