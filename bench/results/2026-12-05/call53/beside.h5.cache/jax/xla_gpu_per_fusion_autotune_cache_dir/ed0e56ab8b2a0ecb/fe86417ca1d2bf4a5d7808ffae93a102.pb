
J
4
ed0e56ab8b2a0ecb fe86417ca1d2bf4a5d7808ffae93a102
fe9062d0fff82a66

€€€13.0.0