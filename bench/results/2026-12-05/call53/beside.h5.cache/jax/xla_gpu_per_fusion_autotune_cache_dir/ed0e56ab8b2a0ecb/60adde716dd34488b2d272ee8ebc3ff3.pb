
J
4
ed0e56ab8b2a0ecb 60adde716dd34488b2d272ee8ebc3ff3
fe9062d0fff82a66 
""2€„9.19.0