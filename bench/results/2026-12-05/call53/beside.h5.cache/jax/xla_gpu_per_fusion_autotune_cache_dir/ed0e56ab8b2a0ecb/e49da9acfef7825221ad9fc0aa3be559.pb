
J
4
ed0e56ab8b2a0ecb e49da9acfef7825221ad9fc0aa3be559
fe9062d0fff82a66@
	
 ((a77e7c793abc0d0c923a9afb275058e2fe57a198