namespace q {
void f()
{
}
}
}
