
J
4
ed0e56ab8b2a0ecb de9016be0df581f67c6976dec30d6883
fe9062d0fff82a66?
	
€ ((a77e7c793abc0d0c923a9afb275058e2fe57a198