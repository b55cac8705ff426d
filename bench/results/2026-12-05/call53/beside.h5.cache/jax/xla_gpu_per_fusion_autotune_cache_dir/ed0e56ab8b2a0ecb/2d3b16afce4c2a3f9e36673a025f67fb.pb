
J
4
ed0e56ab8b2a0ecb 2d3b16afce4c2a3f9e36673a025f67fb
fe9062d0fff82a66
""2êÄËf9.19.0