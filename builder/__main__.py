from tritonbuild.cli import main

main()
