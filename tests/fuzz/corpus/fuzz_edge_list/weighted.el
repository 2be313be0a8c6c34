# comment
% other
0	1	0.5
1 2 2.5e-1
3 3 1
