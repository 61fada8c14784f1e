/* A stand-in library that says it is sluice 99.0.0, so the Python tests
 * can check the binding refuses a library of another version. */
unsigned sl_version_number(void);
const char *sl_version_string(void);

unsigned sl_version_number(void)
{
    return 990000;
}

const char *sl_version_string(void)
{
    return "99.0.0";
}
